export default { name: 'x' };
