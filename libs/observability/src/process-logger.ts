import pino, { DestinationStream, Logger } from 'pino';
import { LogFields } from './log-fields';
import { EngineLogger } from './logger';

/** Log levels, lowest first (`IRONFLOW_LOG_LEVEL`); `silent` logs nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface ProcessLoggerOptions {
  /** The `service` field of every line: `api-gateway`, `dispatcher`, `ironflow-dev`… */
  service: string;
  /** Lowest level written; default `info`. */
  level?: LogLevel;
  /** Where lines go: `stdout` (default), `stderr`, or a stream (tests). */
  destination?: 'stdout' | 'stderr' | DestinationStream;
  /**
   * Human-readable coloured lines (pino-pretty, a development dependency) instead of JSON. Default:
   * only when the destination is a terminal and pino-pretty is installed; never in a pipe or a file.
   */
  pretty?: boolean;
}

/**
 * The process's logger: pino, one JSON object per line — `level` (label), `time` (ISO-8601),
 * `service`, `msg`, then the line's {@link LogFields} (`run_id`, `execution_seq`, `function_id`,
 * `step_id`, `worker_id` under those exact names). Writes synchronously, so the lines before an
 * exit are not lost. Implements the engine's {@link EngineLogger} port; Nest's own logs reach the
 * same pino instance through the services' Nest adapter.
 */
export class ProcessLogger implements EngineLogger {
  constructor(readonly pino: Logger) {}

  log(message: string, fields?: LogFields): void {
    this.pino.info(fields ?? {}, message);
  }

  warn(message: string, fields?: LogFields): void {
    this.pino.warn(fields ?? {}, message);
  }

  error(message: string, fields?: LogFields): void {
    this.pino.error(fields ?? {}, message);
  }

  /** The process cannot go on (start-up failure, shutdown cap): level `fatal`. */
  fatal(message: string, fields?: LogFields): void {
    this.pino.fatal(fields ?? {}, message);
  }

  debug(message: string, fields?: LogFields): void {
    this.pino.debug(fields ?? {}, message);
  }

  /** A logger whose every line also carries `fields` (e.g. `{node_id}` once settings are read). */
  child(fields: LogFields): ProcessLogger {
    return new ProcessLogger(this.pino.child(fields));
  }

  get level(): LogLevel {
    return this.pino.level as LogLevel;
  }

  set level(level: LogLevel) {
    this.pino.level = level;
  }
}

/** Builds the process logger (see {@link ProcessLogger} for the line format). */
export function createProcessLogger(options: ProcessLoggerOptions): ProcessLogger {
  const target = options.destination ?? 'stdout';
  const fd = target === 'stderr' ? 2 : 1;
  const onTerminal = typeof target === 'string' && (fd === 2 ? process.stderr.isTTY : process.stdout.isTTY) === true;
  const pretty = (options.pretty ?? onTerminal) ? prettyStream(fd) : undefined;
  const destination = typeof target !== 'string' ? target : pretty ?? pino.destination({ fd, sync: true });
  return new ProcessLogger(
    pino(
      {
        level: options.level ?? 'info',
        base: { service: options.service },
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      destination,
    ),
  );
}

/** pino-pretty writing to `fd`, when it is installed (a development dependency); else undefined. */
function prettyStream(fd: 1 | 2): DestinationStream | undefined {
  try {
    // Loaded only for a terminal: production installs (npm ci --omit=dev) lack it and log JSON.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const pretty = require('pino-pretty') as typeof import('pino-pretty');
    return pretty({ colorize: true, destination: fd, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  } catch {
    return undefined;
  }
}
