import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoRoot } from './helm';

const run = promisify(execFile);

/**
 * Runs Prometheus's `promtool` (`$PROMTOOL`, else `promtool` on PATH: Debian's package
 * `prometheus`, which `.ci/run` installs when missing) from the repository root. Resolves its
 * output; rejects with it, or with how to install promtool when it is not there.
 */
export async function promtool(args: string[]): Promise<string> {
  const bin = process.env.PROMTOOL ?? 'promtool';
  try {
    const { stdout, stderr } = await run(bin, args, { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (err) {
    const failed = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (failed.code === 'ENOENT') {
      throw new Error(`promtool not found (${bin}): install Debian's package prometheus (apt-get install prometheus; .ci/run does) or set PROMTOOL to a promtool binary`);
    }
    throw new Error(`promtool ${args.join(' ')} failed:\n${failed.stdout ?? ''}${failed.stderr ?? ''}`);
  }
}
