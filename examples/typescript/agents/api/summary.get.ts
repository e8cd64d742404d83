import { defineThreadEndpoint } from '@standardagents/spec';

export default defineThreadEndpoint(async (req, state, params) => {
  return Response.json({ thread: state.threadId, messages: state.messages.length });
});
