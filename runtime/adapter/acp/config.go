package acp

import (
	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

// configIDs are the ids of the agent's session config options (ACP
// configOptions) that Shard maps: the first select option of category
// mode, model and thought_level. Empty: the agent has none of that
// category.
type configIDs struct {
	mode, model, thought sdk.SessionConfigId
}

// configSelects returns the select options of opts by category (the first
// of each; boolean options and other categories map to nothing in Shard).
func configSelects(opts []sdk.SessionConfigOption) (mode, model, thought *sdk.SessionConfigOptionSelect) {
	for _, o := range opts {
		s := o.Select
		if s == nil || s.Category == nil {
			continue
		}
		switch *s.Category {
		case sdk.SessionConfigOptionCategoryMode:
			if mode == nil {
				mode = s
			}
		case sdk.SessionConfigOptionCategoryModel:
			if model == nil {
				model = s
			}
		case sdk.SessionConfigOptionCategoryThoughtLevel:
			if thought == nil {
				thought = s
			}
		}
	}
	return mode, model, thought
}

// idsOf is the ids of the mapped config options of opts.
func idsOf(opts []sdk.SessionConfigOption) configIDs {
	var ids configIDs
	mode, model, thought := configSelects(opts)
	if mode != nil {
		ids.mode = mode.Id
	}
	if model != nil {
		ids.model = model.Id
	}
	if thought != nil {
		ids.thought = thought.Id
	}
	return ids
}

// choices are a select option's values, groups flattened in order.
func choices(s *sdk.SessionConfigOptionSelect) []sdk.SessionConfigSelectOption {
	switch {
	case s.Options.Ungrouped != nil:
		return *s.Options.Ungrouped
	case s.Options.Grouped != nil:
		var out []sdk.SessionConfigSelectOption
		for _, g := range *s.Options.Grouped {
			out = append(out, g.Options...)
		}
		return out
	}
	return nil
}

// describe is a choice's description, else its name.
func describe(c sdk.SessionConfigSelectOption) string {
	if c.Description != nil && *c.Description != "" {
		return *c.Description
	}
	return c.Name
}

// offerFrom is what the session offers: its config options of category
// mode, model and thought_level where it has them (docs/protocol.md
// Appendix A: they are preferred over the older modes and models, which
// an agent may send alongside with the same choices), else its modes and
// models.
func offerFrom(modes *sdk.SessionModeState, models *sdk.SessionModelState, opts []sdk.SessionConfigOption) adapter.Offer {
	o := offerOf(modes, models)
	mode, model, thought := configSelects(opts)
	if mode != nil {
		o.Modes, o.Mode = nil, string(mode.CurrentValue)
		for _, c := range choices(mode) {
			o.Modes = append(o.Modes, protocol.ModeDescriptor{Name: string(c.Value), Description: describe(c)})
		}
	}
	if model != nil {
		o.Models, o.Model = nil, string(model.CurrentValue)
		for _, c := range choices(model) {
			o.Models = append(o.Models, protocol.ModelDescriptor{ID: string(c.Value), Provider: "acp", Model: c.Name})
		}
	}
	if thought != nil {
		o.Level = string(thought.CurrentValue)
		for _, c := range choices(thought) {
			l := adapter.Level{ID: string(c.Value), Label: c.Name}
			if c.Description != nil {
				l.Description = *c.Description
			}
			o.Levels = append(o.Levels, l)
		}
	}
	return o
}
