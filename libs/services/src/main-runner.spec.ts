import { pushFields } from './main-runner';

describe('pushFields: the ready line says which processes call push endpoints and whether they sign', () => {
  const key = 'a-signing-key-of-16+';

  it('api-gateway: gateway_push, and push_signed only while it calls push endpoints itself', () => {
    expect(pushFields({ gatewayPush: true }, ['api-gateway'])).toEqual({ gateway_push: true, push_signed: false });
    expect(pushFields({ gatewayPush: true, signingKey: key }, ['api-gateway'])).toEqual({ gateway_push: true, push_signed: true });
    expect(pushFields({ gatewayPush: false, signingKey: key }, ['api-gateway'])).toEqual({ gateway_push: false });
  });

  it('a dispatcher (or every service in one process) says push_signed; the other services nothing', () => {
    expect(pushFields({ gatewayPush: true, signingKey: key }, ['dispatcher'])).toEqual({ push_signed: true });
    expect(pushFields({ gatewayPush: false }, ['api-gateway', 'dispatcher', 'scheduler'])).toEqual({ push_signed: false });
    expect(pushFields({ gatewayPush: true, signingKey: key }, ['scheduler'])).toEqual({});
    expect(pushFields({ gatewayPush: true }, ['capacity-scanner'])).toEqual({});
  });
});
