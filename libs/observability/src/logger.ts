import { LogFields } from './log-fields';

/**
 * The logger port the libs log through: services pass the process's pino logger
 * ({@link createProcessLogger}), tests a silent one. `fields` are the line's structured fields
 * ({@link LogFields}: fixed snake_case names for run, execution, function, step and worker).
 */
export interface EngineLogger {
  log(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

export const silentLogger: EngineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };
