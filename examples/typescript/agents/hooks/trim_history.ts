import { defineHook } from '@standardagents/spec';

// The model sees the last 12 messages of a long conversation (duet drops a tool result whose
// call was trimmed away, and a call whose result was).
export default defineHook({
  hook: 'filter_messages',
  id: 'trim_history',
  execute: async (state, messages) => messages.slice(-12),
});
