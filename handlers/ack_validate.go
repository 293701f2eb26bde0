package handlers

import (
	"errors"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/queenforgo/queen/gen/api"
)

// The batch ack body is, with the push body, the hottest input: a consumer
// sends one per pop. Like the push it skips the generic body validator
// (which decodes it into a tree a second time and walks the schema for every
// field of every item) and is checked by its handler after the typed
// decode, against the schemas of the same spec.

// ackSchemas are the parts of AckBatchRequest the typed decode does not
// enforce: the item count, the top-level group's name rule, and each item's
// string constraints.
type ackSchemas struct {
	maxItems  int
	group     *openapi3.Schema
	itemProps []pushItemProp // transactionId, partitionId, status, leaseId
}

func (v *requestValidator) loadAckSchema() error {
	req := v.doc.Components.Schemas["AckBatchRequest"]
	item := v.doc.Components.Schemas["AckBatchItem"]
	if req == nil || item == nil {
		return errors.New("spec: AckBatchRequest and AckBatchItem are required")
	}
	list, group := req.Value.Properties["acknowledgments"], req.Value.Properties["consumerGroup"]
	if list == nil || list.Value.MaxItems == nil || group == nil {
		return errors.New("spec: AckBatchRequest.acknowledgments with maxItems and AckBatchRequest.consumerGroup are required")
	}
	v.ack = ackSchemas{maxItems: int(*list.Value.MaxItems), group: group.Value}
	for _, name := range []string{"transactionId", "partitionId", "status", "leaseId"} {
		p := item.Value.Properties[name]
		if p == nil {
			return fmt.Errorf("spec: AckBatchItem.%s is missing", name)
		}
		rule, ok := compileStringRule(p.Value)
		if !ok {
			rule = nil // every value goes to VisitJSON
		}
		v.ack.itemProps = append(v.ack.itemProps, pushItemProp{name: name, schema: p.Value, rule: rule})
	}
	return nil
}

// checkAckBatch applies the AckBatchRequest rules to a decoded batch ack.
// The error member has no constraints.
func (v *requestValidator) checkAckBatch(body *api.AckBatchRequest) error {
	if body.Acknowledgments == nil {
		return invalidf(`invalid request body: property "acknowledgments" is missing`)
	}
	if len(body.Acknowledgments) > v.ack.maxItems {
		return invalidf("invalid request body at acknowledgments: at most %d items are allowed", v.ack.maxItems)
	}
	if body.ConsumerGroup != nil {
		if err := v.ack.group.VisitJSON(*body.ConsumerGroup); err != nil {
			return invalidf("invalid request body at consumerGroup: %s", schemaReason(err))
		}
	}
	// The items of one batch mostly share their partition, lease and
	// status: a value equal to the last one that passed needs no second
	// check (the UUID's regular expression is the costly one). The
	// transactionIds all differ: their compiled rule (string_rule.go) says
	// yes without kin-openapi's allocations.
	var lastValid [4]*string
	for i := range body.Acknowledgments {
		it := &body.Acknowledgments[i]
		for k, p := range v.ack.itemProps {
			var val *string
			switch p.name {
			case "transactionId":
				val = &it.TransactionId
			case "partitionId":
				val = &it.PartitionId
			case "status":
				val = (*string)(it.Status)
			case "leaseId":
				val = it.LeaseId
			}
			if val == nil || (lastValid[k] != nil && *lastValid[k] == *val) {
				continue
			}
			if p.rule == nil || !p.rule.passes(*val) {
				if err := p.schema.VisitJSON(*val); err != nil {
					return invalidf("invalid request body at acknowledgments/%d/%s: %s", i, p.name, schemaReason(err))
				}
			}
			lastValid[k] = val
		}
	}
	return nil
}

// schemaReason is the reason of a schema error without the value dump
// kin-openapi appends to its message.
func schemaReason(err error) string {
	var schemaErr *openapi3.SchemaError
	if errors.As(err, &schemaErr) {
		return schemaErr.Reason
	}
	return err.Error()
}
