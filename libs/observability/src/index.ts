export * from './metrics';
export * from './logger';
export * from './log-fields';
export * from './process-logger';
