import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoRoot } from './helm';

const run = promisify(execFile);

/**
 * Runs the workspace's Nx CLI (`node node_modules/nx/bin/nx.js …`) offline: no daemon, no Nx
 * Cloud. Resolves stdout; rejects with Nx's output.
 */
export async function nx(args: string[]): Promise<string> {
  try {
    const { stdout } = await run(process.execPath, ['node_modules/nx/bin/nx.js', ...args], {
      cwd: repoRoot,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_TUI: 'false', NX_SKIP_NX_CACHE: 'true' },
    });
    return stdout;
  } catch (err) {
    const failed = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`nx ${args.join(' ')} failed:\n${failed.stdout ?? ''}${failed.stderr ?? failed.message}`);
  }
}
