export * from './outcome';
export * from './fenced-outcomes';
