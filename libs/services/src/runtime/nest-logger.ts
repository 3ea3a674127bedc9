import { LoggerService } from '@nestjs/common';
import { ProcessLogger } from '@ironflow/observability';

/**
 * Nest's start-up chatter (module loading, one line per mapped route, its slow-serialization
 * warning): logged at `debug`, so an `info` log shows what the engine does, not how Nest wired itself.
 */
const NEST_WIRING_CONTEXTS = new Set(['NestFactory', 'InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestApplication', 'NestMicroservice']);

/**
 * Nest's warning that a module took long to serialize its token (nestjs/nest#12738): timing of its
 * own start-up on a busy machine, nothing an operator can act on, so `debug` like the wiring.
 */
const NEST_SERIALIZE_WARNING = /^The module ".*" is taking [\d.]+ms to serialize/;

/**
 * Nest's logger routed into the process's pino logger: every Nest line is a JSON line of the same
 * stream, with Nest's context as `context` (and the stack as `stack` when Nest passes one).
 */
export class NestPinoLogger implements LoggerService {
  constructor(private readonly logger: ProcessLogger) {}

  log(message: unknown, ...params: unknown[]): void {
    const { context } = split(params);
    this.write(context && NEST_WIRING_CONTEXTS.has(context) ? 'debug' : 'info', message, params);
  }

  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }

  warn(message: unknown, ...params: unknown[]): void {
    this.write(typeof message === 'string' && NEST_SERIALIZE_WARNING.test(message) ? 'debug' : 'warn', message, params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }

  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  private write(level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal', message: unknown, params: unknown[]): void {
    const { context, stack } = split(params);
    const fields = { ...(context ? { context } : {}), ...(stack ? { stack } : {}) };
    if (message instanceof Error) this.logger.pino[level]({ ...fields, stack: message.stack }, message.message);
    else this.logger.pino[level](fields, typeof message === 'string' ? message : JSON.stringify(message));
  }
}

/** Nest calls `(message, context)` or, for errors, `(message, stack, context)`. */
function split(params: unknown[]): { context?: string; stack?: string } {
  const strings = params.filter((p): p is string => typeof p === 'string');
  if (strings.length >= 2) return { stack: strings[0], context: strings[strings.length - 1] };
  return strings.length === 1 ? { context: strings[0] } : {};
}
