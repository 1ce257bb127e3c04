import { randomUUID } from 'node:crypto';

const hex32 = (): string => randomUUID().replace(/-/g, '');

export const newWebhookId = (): string => `wh_${hex32()}`;
export const newDeliveryId = (): string => `dlv_${hex32()}`;

export const WEBHOOK_ID = /^wh_[0-9a-f]{32}$/;
export const DELIVERY_ID = /^dlv_[0-9a-f]{32}$/;
