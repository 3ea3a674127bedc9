export * from './statuses';
export * from './errors';
export * from './functions';
export * from './wire/steps';
export * from './wire/push';
export * from './wire/pull';
export * from './client-api';
export * from './scope';
