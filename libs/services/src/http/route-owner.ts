/**
 * Which service answers a path (DESIGN.md "Deployables"): worker routes (`/api/v1/workers/*`, the
 * `WorkerService` stream) are the dispatcher's; the client API (other `/api/v1/*`, Connect
 * `/ironflow.v1.*`, `/ws`) and the runs UI are the api-gateway's. `undefined` for anything else.
 */
export function routeOwner(path: string): 'api-gateway' | 'dispatcher' | undefined {
  if (path === '/api/v1/workers' || path.startsWith('/api/v1/workers/') || path.startsWith('/ironflow.v1.WorkerService/')) return 'dispatcher';
  if (path.startsWith('/api/v1/') || path.startsWith('/ironflow.v1.') || path === '/ws' || path === '/' || path.startsWith('/ui/')) return 'api-gateway';
  return undefined;
}

/**
 * The hint a 404 carries when the path belongs to a service this process does not run (a client
 * pointed at a dispatcher, a worker at an api-gateway): which service serves it and how a cluster
 * routes it. `undefined` when this process runs the owner (the path is simply unknown).
 */
export function wrongServiceHint(path: string, services: readonly string[]): string | undefined {
  const owner = routeOwner(path);
  if (!owner || services.includes(owner)) return undefined;
  const here = services.join(', ');
  return owner === 'dispatcher'
    ? `${path} is a worker route, served by the dispatcher; this process runs ${here}. Point workers at an ingress that sends /api/v1/workers/* and /ironflow.v1.WorkerService/* to a dispatcher and everything else to the api-gateway (deploy/docker-compose.yml), or use ironflow dev`
    : `${path} is a client route, served by the api-gateway; this process runs ${here}. Point clients at the api-gateway (or an ingress in front of both), or use ironflow dev`;
}
