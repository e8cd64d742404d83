import { defineHandler } from '@standardagents/spec';
// Limits of its own: a deadline past ten minutes is refused.
export default defineHandler({
  timeoutMs: 900000,
  memoryMb: 128,
  execute: async (state, message) => {},
});
