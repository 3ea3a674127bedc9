import { Command } from 'commander';
import { ApiKeyInfo, IronflowClient } from '@ironflow/sdk';
import { CliIO, CliUsageError } from './print';

/** What the commands here need from the program: output, the action wrapper, and a client with the given key. */
export interface SecurityCommandDeps {
  io: CliIO;
  /** Runs an action, printing an error (text or JSON) and setting exit code 1. */
  action: <A extends unknown[]>(fn: (...args: A) => Promise<void>) => (...args: A) => Promise<void>;
  /** A client of `--server`/`--env`; with `apiKey` given it replaces `--api-key`. */
  client: (apiKey?: string) => IronflowClient;
  /** The whole of standard input (a secret's value when it is not an argument). */
  readStdin?: () => Promise<string>;
}

async function readProcessStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * `ironflow secret set|list|delete`: the secrets of the project and env of `--api-key`/`--env`
 * (issue 9, item 4). A value given as no argument is read from standard input (one trailing
 * newline removed), so it stays out of the shell history and the process list. Values are never
 * printed: `list` shows names and times.
 */
export function secretCommand(deps: SecurityCommandDeps): Command {
  const { io, action, client } = deps;
  const secret = new Command('secret').description('set, list and delete the secrets functions declare (values encrypted at rest, never shown)');
  secret
    .command('set')
    .description('create or replace a secret; without VALUE it is read from standard input')
    .argument('<name>', 'secret name, e.g. STRIPE_KEY')
    .argument('[value]', 'the value (prefer standard input: `printf %s "$V" | ironflow secret set NAME`)')
    .option('--json', 'print JSON')
    .action(
      action(async (name: string, value: string | undefined, o: { json?: boolean }) => {
        const text = value ?? (await (deps.readStdin ?? readProcessStdin)()).replace(/\r?\n$/, '');
        if (text === '') throw new CliUsageError('secret set: the value is empty (give it as an argument or on standard input)');
        const saved = await client().setSecret(name, text);
        io.out(o.json ? JSON.stringify(saved, null, 2) : `secret ${saved.name} saved (updated ${saved.updatedAt})`);
      }),
    );
  secret
    .command('list')
    .description('list secret names (never values)')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { json?: boolean }) => {
        const secrets = await client().listSecrets();
        if (o.json) io.out(JSON.stringify({ secrets }, null, 2));
        else io.out(secrets.length === 0 ? 'no secrets' : secrets.map((s) => `${s.name}  (updated ${s.updatedAt})`).join('\n'));
      }),
    );
  secret
    .command('delete')
    .description('delete a secret')
    .argument('<name>', 'secret name')
    .option('--json', 'print JSON')
    .action(
      action(async (name: string, o: { json?: boolean }) => {
        await client().deleteSecret(name);
        io.out(o.json ? JSON.stringify({ deleted: name }) : `secret ${name} deleted`);
      }),
    );
  return secret;
}

function keyLine(k: ApiKeyInfo): string {
  return `${k.prefix}  project ${k.project}  env ${k.env}${k.name ? `  "${k.name}"` : ''}  created ${k.createdAt}${k.revokedAt ? `  REVOKED ${k.revokedAt}` : ''}`;
}

/**
 * `ironflow apikey create|list|revoke` (issue 9, item 7): admin calls, authenticated with
 * `--admin-key` (default `$IRONFLOW_ADMIN_KEY`, the engine's `IRONFLOW_ADMIN_KEY`); an engine
 * without an admin key that is still open (no key yet) needs none, which is how `ironflow dev`
 * makes its first key. `create` prints the key once; it cannot be shown again.
 */
export function apikeyCommand(deps: SecurityCommandDeps): Command {
  const { io, action, client } = deps;
  const adminClient = (o: { adminKey?: string }) => client(o.adminKey ?? process.env.IRONFLOW_ADMIN_KEY ?? '');
  const apikey = new Command('apikey').description('create, list and revoke API keys (admin: --admin-key or $IRONFLOW_ADMIN_KEY)');
  apikey
    .command('create')
    .description('create a key for a project and env (--env, default "default"); the key is printed once')
    .option('--project <name>', 'the project the key belongs to', 'default')
    .option('--name <text>', 'a label, e.g. the service that uses the key')
    .option('--admin-key <key>', 'the engine\'s IRONFLOW_ADMIN_KEY (default $IRONFLOW_ADMIN_KEY)')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { project: string; name?: string; adminKey?: string; json?: boolean }, command: Command) => {
        const env = command.optsWithGlobals<{ env?: string }>().env ?? 'default';
        const created = await adminClient(o).createApiKey({ project: o.project, env, ...(o.name ? { name: o.name } : {}) });
        if (o.json) io.out(JSON.stringify(created, null, 2));
        else io.out(`${created.key}\n\nThis is the only time the key is shown. ${keyLine(created.apiKey)}\nUse it as IRONFLOW_API_KEY (or --api-key); the engine now requires a key on every call.`);
      }),
    );
  apikey
    .command('list')
    .description('list keys by id and prefix (never the key)')
    .option('--admin-key <key>', 'the engine\'s IRONFLOW_ADMIN_KEY (default $IRONFLOW_ADMIN_KEY)')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { adminKey?: string; json?: boolean }) => {
        const keys = await adminClient(o).listApiKeys();
        if (o.json) io.out(JSON.stringify({ apiKeys: keys }, null, 2));
        else io.out(keys.length === 0 ? 'no API keys (the engine is open)' : keys.map(keyLine).join('\n'));
      }),
    );
  apikey
    .command('revoke')
    .description('revoke a key by id or prefix (ifk_<id>); other processes stop accepting it within IRONFLOW_API_KEY_CACHE_MS')
    .argument('<id>', 'key id or prefix')
    .option('--admin-key <key>', 'the engine\'s IRONFLOW_ADMIN_KEY (default $IRONFLOW_ADMIN_KEY)')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, o: { adminKey?: string; json?: boolean }) => {
        const revoked = await adminClient(o).revokeApiKey(id);
        io.out(o.json ? JSON.stringify({ apiKey: revoked }, null, 2) : `revoked ${keyLine(revoked)}`);
      }),
    );
  return apikey;
}
