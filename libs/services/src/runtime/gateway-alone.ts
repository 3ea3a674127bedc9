/**
 * True when a process serves the api-gateway without a dispatcher (the cluster's gateway, not
 * `ironflow dev`): it forwards the sync triggers it does not push itself, has push slots of its own
 * (`IRONFLOW_GATEWAY_PUSH_SLOTS`) and reports `gateway_push` on its ready line.
 */
export function isGatewayAlone(services: readonly string[]): boolean {
  return services.includes('api-gateway') && !services.includes('dispatcher');
}
