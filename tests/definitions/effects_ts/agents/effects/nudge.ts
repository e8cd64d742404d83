import { defineEffect } from '@standardagents/spec';
export default defineEffect({
  description: 'Nudges the thread.',
  builtin: 'queue_message',
  maxAttempts: 2,
  handler: async (state) => {},
});
