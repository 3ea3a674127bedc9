import { NatsOptions, ServerNats } from '@nestjs/microservices';
import { BusNamespace } from '@ironflow/bus';

/**
 * Nest's NATS transport inside a deployment's namespace (`BusNamespace`): each `@MessagePattern`
 * (a logical subject such as `ironflow.*.*.audit.write`) is subscribed as
 * `ifx.{clusterId}.{pattern}` in the queue group `{clusterId}-{queue}`, and handled by the
 * pattern's own handler. So the audit-writers of two deployments on one NATS server never answer
 * each other's requests, even when both serve the same project and env.
 */
export class NamespacedNatsServer extends ServerNats {
  private readonly queue: string;

  constructor(private readonly namespace: BusNamespace, options: Required<NatsOptions>['options'] & { queue: string }) {
    super({ ...options, queue: namespace.group(options.queue) });
    this.queue = namespace.group(options.queue);
  }

  override bindEvents(client: Parameters<ServerNats['bindEvents']>[0]): void {
    const queue = this.queue;
    for (const pattern of this.messageHandlers.keys()) {
      client.subscribe(this.namespace.subject(pattern), { queue, callback: this.getMessageHandler(pattern).bind(this) });
    }
  }
}
