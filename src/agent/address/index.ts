// Where this node is reached: the host its engines' endpoints and its
// management address name, separate from where they bind.
export { advertisedHost, type AdvertiseInput } from './advertise.js';
