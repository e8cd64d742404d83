import { defineEffect } from '@standardagents/spec';

// Its own handler and a Rust builtin: it runs one way.
export default defineEffect({
  description: 'Nudges twice over.',
  builtin: 'queue_message',
  handler: async (state, args) => {},
});
