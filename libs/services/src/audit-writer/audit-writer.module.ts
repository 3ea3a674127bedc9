import { Module } from '@nestjs/common';
import { AuditWriterController } from './audit-writer.controller';

/**
 * The audit-writer service: over NATS (request-reply through `@nestjs/microservices`) it writes
 * the audit rows every other service's `AuditRecorder` sends. Without NATS (`ironflow dev`) the
 * recorder calls the same writer in-process.
 */
@Module({ controllers: [AuditWriterController] })
export class AuditWriterModule {}
