import { Module } from '@nestjs/common';
import { ClientRpcController } from './client-rpc.controller';
import { RestController } from './rest.controller';
import { PubSubRpcController } from './pubsub-rpc.controller';

/** The api-gateway service: the client API (Connect unary JSON + REST). */
@Module({ controllers: [ClientRpcController, PubSubRpcController, RestController] })
export class ApiGatewayModule {}
