export default defineHandler({
  execute: async (state, message) => {},
});
