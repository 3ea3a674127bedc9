import { createFunction, RetryableError, NonRetryableError } from '@ironflow/sdk';

export interface OrderPlaced {
  orderId: string;
  customer: string;
  items: { sku: string; quantity: number; unitPrice: number }[];
}

export interface Charge {
  chargeId: string;
  orderId: string;
  amount: number;
  attempt: number;
}

/**
 * `payment.charge`: charges the card. The first attempt fails with a retryable error (a simulated
 * processor timeout); the engine retries it after the backoff and the second attempt succeeds.
 */
export const paymentCharge = createFunction(
  { id: 'payment.charge', retry: { maxAttempts: 3, initialDelayMs: 500, backoffFactor: 2, maxDelayMs: 5000 } },
  async ({ event, step, run }) => {
    const { orderId, amount } = event.data as { orderId: string; amount: number };
    return step.run('charge-card', async (): Promise<Charge> => {
      if (run.attempt === 1) throw new RetryableError('card processor timed out (simulated); the engine retries');
      return { chargeId: `ch_${orderId}_${run.attempt}`, orderId, amount, attempt: run.attempt };
    });
  },
);

/**
 * `order.process`, triggered by `order.placed`: validates the order, invokes `payment.charge` and
 * waits for it, sleeps while the warehouse picks, ships, and returns a summary of all of them.
 */
export const orderProcess = createFunction(
  { id: 'order.process', triggers: [{ event: 'order.placed' }] },
  async ({ event, step }) => {
    const order = event.data as OrderPlaced;
    const validated = await step.run('validate-order', async () => {
      if (!order.items?.length) throw new NonRetryableError('an order needs at least one item');
      const total = order.items.reduce((sum, item) => sum + item.quantity * item.unitPrice, 0);
      return { orderId: order.orderId, total, itemCount: order.items.reduce((n, i) => n + i.quantity, 0) };
    });
    const charge = (await step.invoke('payment.charge', { orderId: validated.orderId, amount: validated.total })) as Charge;
    await step.sleep('wait-for-warehouse', '1s');
    const shipment = await step.run('ship', async () => ({ trackingNumber: `TRK-${validated.orderId}`, carrier: 'ironpost' }));
    return {
      orderId: validated.orderId,
      customer: order.customer,
      total: validated.total,
      items: validated.itemCount,
      chargeId: charge.chargeId,
      chargedOnAttempt: charge.attempt,
      trackingNumber: shipment.trackingNumber,
      status: 'shipped',
    };
  },
);

export const functions = [orderProcess, paymentCharge];
