// Package sim will hold the discrete-event simulator that executes protocol
// Programs in virtual time against a model.System. It is not written yet;
// see the project's issues.
package sim
