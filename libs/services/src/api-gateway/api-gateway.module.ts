import { Module } from '@nestjs/common';
import { ApiKeysController } from './api-keys.controller';
import { ClientRpcController } from './client-rpc.controller';
import { RestController } from './rest.controller';
import { SecretsController } from './secrets.controller';
import { PubSubRpcController } from './pubsub-rpc.controller';
import { UiController } from '../ui/ui.controller';
import { InstanceController } from './instance.controller';
import { GatewayPush } from './gateway-push';

/** The api-gateway service: the client API (Connect unary JSON + REST), the push calls of its sync triggers (`GatewayPush`), publish/subscribe, secrets and API key management, instance freeze and thaw, and the runs UI at `/`. */
@Module({ controllers: [ClientRpcController, PubSubRpcController, RestController, SecretsController, ApiKeysController, InstanceController, UiController], providers: [GatewayPush] })
export class ApiGatewayModule {}
