import { Module } from '@nestjs/common';
import { DispatcherLoop } from './dispatcher-loop';
import { WorkersController } from './workers.controller';

/** The dispatcher service: push dispatch and pull workers over REST. */
@Module({ controllers: [WorkersController], providers: [DispatcherLoop] })
export class DispatcherModule {}
