// Package examples holds sample shipment updates for `shipnotify schedule -f`;
// its test keeps them valid.
package examples
