export * from './fence';
export * from './job-id';
