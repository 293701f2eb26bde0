package identity_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/catalog"
	"github.com/queenforgo/queen/proxy/identity"
	"github.com/queenforgo/queen/proxy/session"
	"github.com/queenforgo/queen/sql/migrate"
	"github.com/queenforgo/queen/sql/pgtest"
	"github.com/queenforgo/queen/sql/proxy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestCredential(t *testing.T) {
	t.Parallel()
	id := identity.New(identity.Config{Cookie: session.Cookie{Name: "queen_session"}})
	for _, tt := range []struct {
		name, auth, cookie, mode string
		api                      bool
		want                     identity.Credential
	}{
		{"a key in the header", "Bearer qk_live_x", "", "", true, identity.Credential{APIKey: "qk_live_x"}},
		{"a raw key", "qk_live_x", "", "", true, identity.Credential{APIKey: "qk_live_x"}},
		{"a session bearer wins over the cookie", "Bearer eyJ", "queen_session=c", "", true, identity.Credential{Session: "eyJ"}},
		{"the cookie", "", "queen_session=c", "", true, identity.Credential{Session: "c", FromCookie: true}},
		{"a key in the cookie is ignored", "", "queen_session=qk_live_x", "", true, identity.Credential{}},
		{"no cookie on an API navigation", "", "queen_session=c", "navigate", true, identity.Credential{}},
		{"the dashboard takes it on a navigation", "", "queen_session=c", "navigate", false, identity.Credential{Session: "c", FromCookie: true}},
		{"lowercase bearer is the raw value", "bearer x", "", "", true, identity.Credential{Session: "bearer x"}},
	} {
		r := httptest.NewRequest("GET", "/api/v1/x", nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		if tt.cookie != "" {
			r.Header.Set("Cookie", tt.cookie)
		}
		if tt.mode != "" {
			r.Header.Set("Sec-Fetch-Mode", tt.mode)
		}
		require.Equal(t, tt.want, id.Credential(r, tt.api), tt.name)
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	classes := []routes.ProxyClass{routes.ProxyProduce, routes.ProxyConsume, routes.ProxyQueueAdmin, routes.ProxyRead,
		routes.ProxyGatedRead, routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed, routes.ProxyOperator, routes.ProxyBlocked}
	want := map[string][]bool{
		"admin":    {true, true, true, true, true, true, true, true, false, false},
		"producer": {true, false, false, true, true, true, true, true, false, false},
		"consumer": {false, true, false, true, true, true, true, true, false, false},
		"viewer":   {false, false, false, true, true, false, false, false, false, false},
		"root":     {false, false, false, false, false, false, false, false, false, false},
	}
	for role, row := range want {
		for i, c := range classes {
			require.Equal(t, row[i], identity.Permits(role, c), "%s on %s", role, c)
		}
	}
	require.Equal(t, []string{"read-only"}, identity.Access("viewer"))
	require.Len(t, identity.Access("admin"), 4)
	require.Empty(t, identity.Access("none"))
}

// With pxdb unreachable, the deny-list cannot be read: strict refuses the
// session, the default lets a session whose user it knows through.
func TestRevocationStrict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.NewEmptyDB(t)
	setupPool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer setupPool.Close()
	require.NoError(t, migrate.ApplySet(ctx, setupPool, migrate.Set{Schema: migrations.Schema, FS: migrations.FS, LockKey: migrations.LockKey}, nil))
	var tenant, user uuid.UUID
	require.NoError(t, setupPool.QueryRow(ctx, `SELECT queen_proxy.create_tenant('acme', 'Acme')`).Scan(&tenant))
	require.NoError(t, setupPool.QueryRow(ctx, `SELECT queen_proxy.create_user($1, 'a@acme.test', NULL)`, tenant).Scan(&user))

	tokens, err := session.New(session.Config{Secret: "s", Issuer: "queen-proxy"})
	require.NoError(t, err)
	tok, _, err := tokens.Mint(user, "viewer", nil, time.Hour)
	require.NoError(t, err)
	for _, strict := range []bool{false, true} {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		cat := catalog.New(catalog.Config{Pool: pool, Timeout: time.Second, StaleGrace: time.Hour})
		id := identity.New(identity.Config{Tokens: tokens, Catalog: cat, RevocationStrict: strict})
		h, err := id.Authenticate(ctx, tok)
		require.NoError(t, err)
		require.Equal(t, user, h.User.ID)
		pool.Close()
		_, err = id.Authenticate(ctx, tok)
		if strict {
			require.ErrorIs(t, err, identity.ErrUnavailable)
			require.Equal(t, 503, identity.Status(err))
		} else {
			require.NoError(t, err, "fail open: the user is known, the deny-list cannot be read")
		}
	}
	_, err = identity.New(identity.Config{Tokens: tokens}).Authenticate(ctx, "garbage")
	require.ErrorIs(t, err, identity.ErrInvalid)
}
