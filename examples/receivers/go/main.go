// A service of yours receiving Oncehook's destination calls (docs/destinations.md), in Go:
// verify with the official Standard Webhooks library, then apply the effect and remember the
// webhook-id in ONE transaction, so a repeated call is answered 200 and applies nothing.
//
//	go get github.com/standard-webhooks/standard-webhooks/libraries github.com/jackc/pgx/v5
//	WEBHOOK_SECRET=whsec_... DATABASE_URL=postgres://... PORT=4022 go run .
//
// (Not run by Oncehook's tests: its CI machines have no Go toolchain. The TypeScript and Python
// receivers beside this one are run by test/destinations.test.ts.)
package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

type envelope struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	EventID string `json:"eventId"`
	Data    struct {
		Data struct {
			Object struct {
				Amount int `json:"amount"`
			} `json:"object"`
		} `json:"data"`
	} `json:"data"`
}

func main() {
	ctx := context.Background()
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET")) // whsec_...
	if err != nil {
		log.Fatal(err)
	}
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = db.Exec(ctx, `CREATE TABLE IF NOT EXISTS received_webhooks (webhook_id text PRIMARY KEY, type text NOT NULL);
		CREATE TABLE IF NOT EXISTS credits (event_id text NOT NULL, amount integer NOT NULL, webhook_id text NOT NULL REFERENCES received_webhooks)`)
	if err != nil {
		log.Fatal(err)
	}

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// The signature (v1) and the timestamp (within 5 minutes).
		if err := wh.Verify(body, r.Header); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var event envelope
		if err := json.Unmarshal(body, &event); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id")
		tx, err := db.Begin(r.Context())
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable) // Oncehook retries with the same webhook-id
			return
		}
		defer tx.Rollback(r.Context())
		tag, err := tx.Exec(r.Context(), `INSERT INTO received_webhooks (webhook_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, event.Type)
		if err == nil && tag.RowsAffected() == 1 {
			_, err = tx.Exec(r.Context(), `INSERT INTO credits (event_id, amount, webhook_id) VALUES ($1, $2, $3)`, event.EventID, event.Data.Data.Object.Amount, id)
		}
		if err == nil {
			err = tx.Commit(r.Context())
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]bool{"applied": tag.RowsAffected() == 1})
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "4022"
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
