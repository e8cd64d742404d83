export default defineEffect('No arguments.', async () => {});
