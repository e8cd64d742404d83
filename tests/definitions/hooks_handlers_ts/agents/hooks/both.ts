import { defineHook } from '@standardagents/spec';
export default defineHook({
  hook: 'tool_call_done',
  id: 'both',
  builtin: 'audit_log',
  execute: async (state, call, result) => {},
});
