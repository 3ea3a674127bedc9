import { Module } from '@nestjs/common';
import { ApiKeysController } from './api-keys.controller';
import { ClientRpcController } from './client-rpc.controller';
import { RestController } from './rest.controller';
import { SecretsController } from './secrets.controller';
import { PubSubRpcController } from './pubsub-rpc.controller';
import { UiController } from '../ui/ui.controller';
import { InstanceController } from './instance.controller';

/** The api-gateway service: the client API (Connect unary JSON + REST), publish/subscribe, secrets and API key management, instance freeze and thaw, and the runs UI at `/`. */
@Module({ controllers: [ClientRpcController, PubSubRpcController, RestController, SecretsController, ApiKeysController, InstanceController, UiController] })
export class ApiGatewayModule {}
