package capture

import "context"

type ownerCtxKey struct{}

// WithOwner returns a context whose feedback and commit requests act for
// owner: they may reward or commit only sessions that owner opened. A
// context without an owner (the control plane) may act on every session.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerCtxKey{}, owner)
}

// OwnerFrom returns the owner a context acts for, "" for none.
func OwnerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerCtxKey{}).(string)
	return o
}
