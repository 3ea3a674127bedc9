/**
 * Jest global setup: tests need PostgreSQL and NATS. They are found through
 * IRONFLOW_TEST_DATABASE_URL and IRONFLOW_TEST_NATS_URL; without them, testcontainers starts
 * both where Docker answers; with neither, the run fails and says what to set.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.IRONFLOW_TEST_DATABASE_URL && process.env.IRONFLOW_TEST_NATS_URL) return;
  let containers: typeof import('testcontainers') | undefined;
  try {
    containers = await import('testcontainers');
    await containers.getContainerRuntimeClient();
  } catch {
    throw new Error(
      'Ironflow tests need PostgreSQL and NATS JetStream. Set IRONFLOW_TEST_DATABASE_URL ' +
        '(e.g. postgres://postgres@127.0.0.1:5432/postgres) and IRONFLOW_TEST_NATS_URL (e.g. nats://127.0.0.1:4222), ' +
        'or run where Docker is available so testcontainers can start them.',
    );
  }
  const pg = await new containers.GenericContainer('postgres:16-alpine')
    .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
    .withExposedPorts(5432)
    .withWaitStrategy(containers.Wait.forLogMessage(/database system is ready to accept connections/, 2))
    .start();
  const nats = await new containers.GenericContainer('nats:2.10-alpine').withCommand(['-js']).withExposedPorts(4222).start();
  process.env.IRONFLOW_TEST_DATABASE_URL = `postgres://postgres@${pg.getHost()}:${pg.getMappedPort(5432)}/postgres`;
  process.env.IRONFLOW_TEST_NATS_URL = `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`;
}
