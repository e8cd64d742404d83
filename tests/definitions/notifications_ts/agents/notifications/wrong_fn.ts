import { defineEffect } from '@standardagents/spec';
export default defineEffect({ description: 'not a notification', slack: { channel: 'C1' } });
