/**
 * The protobuf-es messages, enums and services of `proto/ironflow/v1` (generated into `./gen`
 * by `npx buf generate`; never hand-edited). Imported as `@ironflow/contracts/proto`.
 */
export * from './gen/ironflow/v1/types_pb';
export * from './gen/ironflow/v1/service_pb';
export * from './gen/ironflow/v1/worker_pb';
export * from './gen/ironflow/v1/pubsub_pb';
