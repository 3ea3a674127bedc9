import { Module } from '@nestjs/common';
import { ClientRpcController } from './client-rpc.controller';
import { RestController } from './rest.controller';
import { PubSubRpcController } from './pubsub-rpc.controller';
import { UiController } from '../ui/ui.controller';

/** The api-gateway service: the client API (Connect unary JSON + REST) and the runs UI at `/`. */
@Module({ controllers: [ClientRpcController, PubSubRpcController, RestController, UiController] })
export class ApiGatewayModule {}
