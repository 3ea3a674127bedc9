import { Command, InvalidArgumentError } from 'commander';
import { functionOptionsHelp } from '@ironflow/engine';
import { CliUsageError } from './print';

/** `ironflow dev --help`: the security settings (issue 9, items 4 and 7). */
export const DEV_SECURITY_HELP = `
Security (environment variables):
  API keys          none until the first key is made: the server is OPEN (every caller may use every
                    route without a key; dev says so at start; a key sent is checked all the same,
                    an unknown one is 401). Once a key exists, every client and worker route needs
                    "Authorization: Bearer <key>" (401 UNAUTHENTICATED otherwise); the key decides
                    the project and env of the call. Make keys with \`ironflow apikey create\`.
  IRONFLOW_REQUIRE_API_KEY=true   require keys even before the first one exists
  IRONFLOW_ADMIN_KEY=<32+ chars>  the bearer of \`ironflow apikey\` (key management); without it,
                                  anyone may make the first key while the server is open
  IRONFLOW_API_KEY_CACHE_MS       how long a key lookup is trusted (default 5000): a revoked key
                                  stops working in other processes within this time
  IRONFLOW_SECRETS_KEY=<32 bytes, hex or base64>   encrypts secrets (AES-256-GCM); without it
                    \`ironflow secret set\` and functions declaring secrets are refused
  IRONFLOW_PUSH_ALLOWED_HOSTS     comma list of CIDRs, addresses, host names, *.domain that push
                    endpoints may be at; default anywhere except link-local (169.254.0.0/16,
                    fe80::/10) and cloud metadata addresses, which are always refused`;

/**
 * `ironflow dev`: every service in one process on SQLite (`.ironflow/dev.db` by default) with the
 * in-process bus, on port 9123; `IRONFLOW_DATABASE_URL` and `NATS_URL` switch it to PostgreSQL
 * and NATS. Prints the URL and the security mode, then one line per run outcome (stdout); engine
 * warnings and errors go to stderr as JSON lines (coloured text on a terminal). Ctrl-C drains and
 * stops. Its help lists every function registration option with its semantics
 * (`FUNCTION_OPTIONS`) and the security settings; at start it says whether API keys are required
 * or the server is open, and whether secrets can be stored.
 */
export function devCommand(): Command {
  return new Command('dev')
    .description('run every Ironflow service in this process on SQLite, with the runs UI at http://localhost:<port>/')
    .addHelpText('after', DEV_SECURITY_HELP)
    .option('--port <port>', 'port for REST, Connect, gRPC and the UI (default: IRONFLOW_PORT, else 9123)', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('Expected a port number, 0 to 65535.');
      return n;
    })
    .option('--db <path>', 'SQLite file (refused when IRONFLOW_DATABASE_URL is set)', '.ironflow/dev.db')
    .addHelpText(
      'after',
      [
        '',
        'Store and bus: SQLite and an in-process bus by default. To run on PostgreSQL and NATS instead, set',
        '  IRONFLOW_DATABASE_URL=postgres://user@host:5432/db   (the store; --db is then refused)',
        '  NATS_URL=nats://host:4222                            (the bus, NATS JetStream)',
        'Other settings: IRONFLOW_LOG_LEVEL (default warn here), IRONFLOW_SHUTDOWN_TIMEOUT_MS (default 30000).',
        '',
        functionOptionsHelp(),
      ].join('\n'),
    )
    .action(async (o: { port?: number; db: string }, command: Command) => {
      if (process.env.IRONFLOW_DATABASE_URL && command.getOptionValueSource('db') === 'cli') {
        throw new CliUsageError('--db names a SQLite file, but IRONFLOW_DATABASE_URL is set and would be used instead: give one of them');
      }
      // The services (Nest, the stores, the bus) load only here: every other command starts without them.
      const { runDevServer } = await import('./dev-server');
      await runDevServer(o);
    });
}
