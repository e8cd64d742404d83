import { defineEffect } from '@standardagents/spec';

export default defineEffect(
  'Sends the daily digest.',
  { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
  async (state, args) => {
    await state.queueMessage({ role: 'user', content: `digest for ${args.to}` });
  },
);
