import { Command } from 'commander';
import { InstanceStatusView } from '@ironflow/contracts';
import { SecurityCommandDeps } from './security-commands';

/** `frozen since 2026-… by admin (backup)` and the work held, one line each. */
export function instanceStatusLines(s: InstanceStatusView): string {
  const since = s.since ? ` since ${s.since}` : '';
  const by = s.by ? ` by ${s.by}` : '';
  const reason = s.reason ? ` (${s.reason})` : '';
  const h = s.held;
  return `instance ${s.state}${since}${by}${reason}\nheld pending: ${h.total} (queued segments ${h.queued}, admissions ${h.admissions}, due sleeps ${h.sleeps}, parent wakes ${h.wakes})`;
}

/**
 * `ironflow instance freeze|thaw|status` (README "Freezing an instance"): admin calls, with
 * `--admin-key` (default `$IRONFLOW_ADMIN_KEY`) like `ironflow apikey`. A frozen instance admits
 * no new work; its passes wait it out and the work held lands after the thaw. A transition that
 * could not get its locks in 500 ms prints `UNAVAILABLE` and changed nothing: run it again.
 */
export function instanceCommand(deps: Pick<SecurityCommandDeps, 'io' | 'action' | 'client'>): Command {
  const { io, action, client } = deps;
  const adminClient = (o: { adminKey?: string }) => client(o.adminKey ?? process.env.IRONFLOW_ADMIN_KEY ?? '');
  const instance = new Command('instance').description('freeze, thaw and show the instance authority (admin: --admin-key or $IRONFLOW_ADMIN_KEY)');
  for (const [name, description] of [
    ['freeze', 'stop admitting new work (claims, admissions, sleep wakeups, parent resumes, wait timeouts, lease recovery) until a thaw; attempts in flight still report'],
    ['thaw', 'admit work again; what the freeze held lands on the next passes'],
  ] as const) {
    instance
      .command(name)
      .description(description)
      .option('--reason <text>', 'kept with the state and in the audit row')
      .option('--admin-key <key>', 'the engine\'s IRONFLOW_ADMIN_KEY (default $IRONFLOW_ADMIN_KEY)')
      .option('--json', 'print JSON')
      .action(
        action(async (o: { reason?: string; adminKey?: string; json?: boolean }) => {
          const c = adminClient(o);
          const done = name === 'freeze' ? await c.freezeInstance(o.reason) : await c.thawInstance(o.reason);
          if (o.json) io.out(JSON.stringify(done, null, 2));
          else io.out(`${done.changed ? '' : `already ${done.status.state}: nothing changed\n`}${instanceStatusLines(done.status)}`);
        }),
      );
  }
  instance
    .command('status')
    .description('print the state, since when, by whom, and the work held pending')
    .option('--admin-key <key>', 'the engine\'s IRONFLOW_ADMIN_KEY (default $IRONFLOW_ADMIN_KEY)')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { adminKey?: string; json?: boolean }) => {
        const status = await adminClient(o).instanceStatus();
        io.out(o.json ? JSON.stringify(status, null, 2) : instanceStatusLines(status));
      }),
    );
  return instance;
}
