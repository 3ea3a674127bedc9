export * from './follow-up-tracker';
