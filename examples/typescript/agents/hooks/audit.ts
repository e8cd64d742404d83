import { defineHook } from '@standardagents/spec';

export default defineHook({
  hook: 'after_create_message',
  id: 'audit',
  execute: async (state, message) => {
    console.log('message', message.id, message.role);
  },
});
