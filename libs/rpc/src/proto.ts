/**
 * Every generated `ironflow.v1` message, enum and service (protobuf-es v2), re-exported flat.
 * Imported by consumers as the `v1` namespace of `@ironflow/rpc` (`v1.RunSchema`,
 * `v1.WorkerService`, `v1.RunStatus.FAILED`) so the proto enums never clash with the
 * `@ironflow/contracts` string unions of the same name.
 */
export * from './gen/ironflow/v1/types_pb';
export * from './gen/ironflow/v1/service_pb';
export * from './gen/ironflow/v1/worker_pb';
