import { Module } from '@nestjs/common';

/**
 * The audit-writer service. The NATS request-reply writer comes with the follow-ups issue;
 * until then the engine writes its few audit rows in its own transactions, and the service
 * starts and answers `/health`, `/ready` and `/metrics`.
 */
@Module({})
export class AuditWriterModule {}
