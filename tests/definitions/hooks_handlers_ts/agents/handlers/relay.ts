import { defineHandler } from '@standardagents/spec';
export default defineHandler({
  execute: async (state, message) => {},
});
