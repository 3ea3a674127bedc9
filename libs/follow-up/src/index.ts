export * from './follow-up-tracker';
export * from './slot-set';
export * from './audit-recorder';
export * from './audit-writer';
export * from './in-process-audit-sink';
export * from './nats-audit-sink';
export * from './store-audit-fates';
