import { defineThreadEndpoint } from '@standardagents/spec';

// GET /threads/{key}/api/summary: what the thread holds, as JSON.
export default defineThreadEndpoint(async (req, state, params) => {
  const { total } = await state.getMessages();
  return Response.json({
    thread: state.threadId,
    agent: state.agentId,
    messages: total,
    lastOrder: await state.getValue('last_order'),
  });
});
